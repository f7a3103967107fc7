"""What clients ask that llama-server leaves out, done by the gateway itself: forced tool
calls, `n` > 1 and `echo`.

Such a request (`plan.shape_of` decides, once) is not relayed byte for byte: a streamed
chat or text completion is rewritten chunk by chunk as llama-server generates each
choice (live.py); anything else is built from llama-server's whole answers, in the
client's shape, and told as that family's events when the client asked for a stream.
"""
