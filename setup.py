"""The native OTLP decoder; optional, so an install without a C compiler still works."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "collectors._otlp_native",
            ["collectors/_otlp_native.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
