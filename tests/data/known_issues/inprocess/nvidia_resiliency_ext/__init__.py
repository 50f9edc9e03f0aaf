"""Test fixture: an importable ``nvidia_resiliency_ext``, which is what nccl.known_issues looks
for to tell that a job can use NVIDIA Resiliency Extension's in-process restart. It holds
nothing of the real package."""
