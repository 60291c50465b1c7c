"""Keeping state current from changelogs: the changelog reader, standby tasks and their updater."""
