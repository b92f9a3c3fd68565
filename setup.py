"""Native OTLP decoding and uid memory: optional, the Python paths serve without a compiler."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "collectors._otlp_native",
            ["collectors/_otlp_native.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "collectors._uid_memory",
            ["collectors/_uid_memory.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
    ]
)
