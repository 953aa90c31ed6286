"""The stages of a call that are not a mode's: acquiring and releasing the sandbox."""
