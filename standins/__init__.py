"""Local stand-ins of outside services, one per service, shared by the tests, `make run` and the benchmarks.

Each answers or sends exactly what the service's documentation shows, so the code that talks to the real
service is the code under test. The product never imports this package (.importlinter).
"""
