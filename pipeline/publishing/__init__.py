"""From topics to a site: prompt templates, topic lists, copying done articles out."""
