"""Built-in policy packs shipped with the router (`use: [decision, deepseek, cuttle]`)."""
