"""Skills on screen: the chat window's skills (chips, `/name`, mentions) and the skills panel."""
