"""OpenAPI schema post-processing: what drf-spectacular cannot say from the views themselves."""

# Whether an operation's body may be left out, as the code behaves: the docs beacon answers 204 to
# anything, no body included; an MCP event always needs one (drf-spectacular leaves a oneOf body optional).
BODY_REQUIRED = {"docs_activity": False, "tracking_mcp_events": True}
# config.middleware answers it on every route, before any view.
UNSTORABLE_TEXT = (
    "Text that cannot be stored (NUL, an unpaired surrogate) in the path, query or headers: "
    '`{"error": {"code", "message", "fields"}}`.'
)


def request_bodies_as_enforced(result, generator, request, public):
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and operation.get("operationId") in BODY_REQUIRED:
                operation.get("requestBody", {})["required"] = BODY_REQUIRED[operation["operationId"]]
    return result


def every_operation_refuses_unstorable_text(result, generator, request, public):
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].setdefault("400", {"description": UNSTORABLE_TEXT})
    return result
