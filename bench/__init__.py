"""`make bench` and `make soak`: the load harness. Not part of the service; see bench/README.md."""
