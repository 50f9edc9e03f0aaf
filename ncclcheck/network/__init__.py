"""What the net family stands on: interfaces and NCCL/Gloo's choice among them, the master
address and port, and the node-to-node mesh."""
