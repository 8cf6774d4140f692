from ora_core import hookimpl
from ora_core.api import LazyBackendFactory


@hookimpl
def ora_register_backends(register):
    # the type name is known at once; backend.py (and llama.cpp with it) is imported on first use
    register(LazyBackendFactory("text-completion", "ora_example_backend.backend:TextCompletionFactory",
                                options="ora_example_backend.backend:TextCompletionOptions"))
