"""The foundation every app builds on: database and cache helpers, the API's error shape and parsers, throttles,
stream caps, client addresses, secrets, batching, logging, staff groups, admin fencing and the production checks.
It imports no app and nothing from config/ (the wiring above everything)."""
