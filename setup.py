"""redflow-gevent: durable Redis-backed workflows with a gevent worker."""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="redflow-gevent",
    version="0.1.0",
    description="Durable Redis-backed workflow engine for Python with a gevent worker",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["redflow", "redflow.*"]),
    include_package_data=True,
    package_data={
        "redflow": ["py.typed"],
        "redflow.ops.dashboard": ["assets/*.html", "assets/*.css", "assets/*.js"],
        "redflow.store": ["lua/*.lua"],
    },
    install_requires=[
        "gevent>=23.9",
        "redis>=5",
        "hiredis>=2",
        "croniter>=2",
        "orjson>=3.9",
    ],
    extras_require={
        "test": [
            # <9.2: pytest 9.2's node ids lose pytest-xdist's --dist loadgroup groups (pytest-xdist#1386),
            # which scripts/test relies on (tests/parallel.py)
            "pytest>=8,<9.2",
            "pytest-benchmark>=4",
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            "gunicorn[gevent]>=22",
            "prometheus_client>=0.17",
            "selenium>=4.11",
            "ruff>=0.6",
            "mypy>=1.10",
            "types-croniter",
            "tox>=4",
            "opentelemetry-api>=1.20",
            "opentelemetry-sdk>=1.20",
        ],
        "metrics": ["prometheus_client>=0.17"],
        # embedding under gunicorn: its gevent worker imports `packaging`, which gunicorn requires only under its gevent extra
        "gunicorn": ["gunicorn[gevent]>=22"],
        # tracing (redflow.ops.observe.otel); the SDK to export spans, the API alone to emit them
        "otel": ["opentelemetry-api>=1.20", "opentelemetry-sdk>=1.20"],
        # the docs site (mkdocs.yml; scripts/docs, tests/test_docs.py)
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.27"],
        # bench/peers.py: the same no-op jobs through Dramatiq and Huey, side by side
        "peers": ["dramatiq[redis,gevent]>=1.15", "huey>=2.5"],
        # redflow.contrib.django: Django 6's tasks framework; on Python 3.11 (where
        # Django 6 is not released) Django 5.2 LTS with the django-tasks backport
        "django": ["Django>=5.2", "django-tasks>=0.12; python_version < '3.12'"],
    },
    entry_points={
        "console_scripts": ["redflow-gevent=redflow.ops.cli:main"],
        "pytest11": ["redflow = redflow.testing.pytest_plugin"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "Topic :: System :: Distributed Computing",
    ],
)
