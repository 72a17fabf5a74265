"""Kapa chatbot engagement of signed-in users: thread count, last interaction, questions, competitor mentions."""
