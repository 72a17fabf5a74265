"""The chat widget page at `/chat/`: a template and a small script that talk to the stream endpoint."""

import uuid

from django.shortcuts import render

from chat.api import widget_token_issue


def chat_widget(request):
    # A new session for a new visitor; the script keeps the one it already has (and its token) on reload.
    session_id = uuid.uuid4().hex
    return render(
        request, "chat/widget.html", {"session_id": session_id, "widget_token": widget_token_issue(session_id)}
    )
