from django.urls import path

from chat.api import TranscriptView, chat_stream
from chat.views import chat_widget

urlpatterns = [
    path("chat/", chat_widget, name="chat-widget"),
    path("api/chat/stream", chat_stream, name="chat-stream"),
    path("api/chat/sessions/<str:session_id>/messages", TranscriptView.as_view(), name="chat-transcript"),
]
