"""A backend plugin whose import fails (tests that it can't take others down)."""

raise ImportError("rtx-broken needs libbroken.so, which is not installed")
