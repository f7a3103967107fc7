"""What clients ask that llama-server leaves out, done by the gateway itself: forced tool
calls, `n` > 1 and `echo`.

Such a request (`plan.shape_of` decides, once) is not relayed byte for byte: the gateway
sends llama-server whole (unstreamed) requests, builds the answer in the client's shape,
and streams it as that family's events when the client asked for a stream.
"""
