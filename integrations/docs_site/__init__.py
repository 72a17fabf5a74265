"""Pages of our documentation site, read as text for the MCP server's get_page tool."""
