"""Plain `nn.Module` networks. They know nothing about Lightning, devices or processes."""
