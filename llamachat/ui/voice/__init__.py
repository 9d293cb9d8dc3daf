"""Voice in the windows: dictation into the composer (`dictation_input.DictationInput`: the
microphone button, hold-to-talk, "Transcribe audio file…"), over the Qt-free `llamachat.voice`."""
