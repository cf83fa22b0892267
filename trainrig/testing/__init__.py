"""What tests and benchmarks of a project built on trainrig use to run jobs the way a cluster would, on one machine:
emulated hosts (`hosts`: network namespaces, each with its own address, name and working directory). Standard
library only; nothing here runs in a training job."""
