"""An App of the tests' own (notes), served through every door of the service: not the task assistant."""
