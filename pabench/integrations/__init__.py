"""Optional integrations on top of the benchmark: a built dataset as a FiftyOne dataset and
its App (`fiftyone_view`, `fiftyone_app`; the `fiftyone` extra), and publishing a built dataset
to the Hugging Face Hub (`hub_push`). Nothing below this room imports it."""
