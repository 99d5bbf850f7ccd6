"""Pure data of Agent Lab: messages, stream items, tool-call events and errors. No I/O."""
