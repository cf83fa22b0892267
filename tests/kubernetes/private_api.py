"""What the Kubernetes jobs touch."""

from lightning.pytorch.strategies import DDPStrategy

ATTRIBUTES = [("DDPStrategy", lambda: DDPStrategy(), "_num_nodes", "trainrig/kubernetes/elastic.py (assigned)")]
