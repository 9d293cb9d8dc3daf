"""The widgets a chat is made of: the message column and its markdown, the composer, the
sidebar, the meter, the top bar and its pickers, chips, notices and the overflow panel.
Views show state and emit what the person did; they own no chat logic."""
