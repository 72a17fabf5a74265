"""V0 Platform API v2: prototype chats, their messages, plan approval, preview."""
