"""The agent layer: tools, model adapters and the AgentChat loop."""
