"""The sales agent (an Agno agent over a WebSocket, or an Agno AgentOS over HTTP): the chat relay's client."""
