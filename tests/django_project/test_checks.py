"""Django's system checks report every mistake in the backend's settings
with an id (``manage.py check``), and the worker does not start on them."""

import json

import pytest
from django.conf import settings
from django.core import checks
from django.test import override_settings
from support import Workers

GOOD_URL = "redis://127.0.0.1:6379/0"


def redflow_check_ids(options=None, queues=None):
    default = dict(settings.TASKS["default"])
    if options is not None:
        default["OPTIONS"] = options
    if queues is not None:
        default["QUEUES"] = queues
    with override_settings(TASKS={"default": default}):
        return [(m.id, m.msg) for m in checks.run_checks() if m.id and m.id.startswith("redflow.")]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, "redflow.E001"),
        ({"REDIS_URL": ""}, "redflow.E001"),
        ("redis://127.0.0.1:6379/0", "redflow.E001"),  # OPTIONS itself must be a dict
        ({"REDIS_URL": "http://127.0.0.1/"}, "redflow.E002"),
        ({"REDIS_URL": "127.0.0.1:6379"}, "redflow.E002"),
        ({"REDIS_URL": "redis://127.0.0.1:port/0"}, "redflow.E002"),
        ({"REDIS_URL": "redis+cluster://"}, "redflow.E002"),
        ({"REDIS_URL": 6379}, "redflow.E002"),
        ({"REDIS_URL": GOOD_URL, "REDIS_ULR": GOOD_URL}, "redflow.E003"),
        ({"REDIS_URL": GOOD_URL, "PREFIX": ""}, "redflow.E004"),
        ({"REDIS_URL": GOOD_URL, "MAX_ATTEMPTS": 0}, "redflow.E005"),
        ({"REDIS_URL": GOOD_URL, "MAX_ATTEMPTS": "3"}, "redflow.E005"),
        ({"REDIS_URL": GOOD_URL, "MAX_ATTEMPTS": True}, "redflow.E005"),
        ({"REDIS_URL": GOOD_URL, "RETENTION": "1 day"}, "redflow.E006"),
        ({"REDIS_URL": GOOD_URL, "RETENTION": -5}, "redflow.E006"),
        ({"REDIS_URL": GOOD_URL, "APP": ""}, "redflow.E008"),
        ({"REDIS_URL": GOOD_URL, "APP": 7}, "redflow.E008"),
    ],
)
def test_each_mistake_in_the_options_is_a_check_error_with_its_id(options, expected):
    assert [found for found, _ in redflow_check_ids(options)] == [expected]


def test_good_options_pass_the_checks():
    options = {"REDIS_URL": "rediss://user:pw@redis.example:6380/2", "PREFIX": "shop:v1", "MAX_ATTEMPTS": 3, "RETENTION": None}
    assert redflow_check_ids({**options, "APP": "shop"}) == []
    assert redflow_check_ids(options) == []
    assert redflow_check_ids({"REDIS_URL": "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster"}) == []
    assert redflow_check_ids({"REDIS_URL": "unix:///run/redis.sock"}) == []


def test_a_queue_the_worker_cannot_name_is_a_check_error():
    assert [found for found, _ in redflow_check_ids(queues=["default", "a,b"])] == ["redflow.E007"]


def test_the_message_of_a_bad_url_does_not_show_its_password():
    [(_, message)] = redflow_check_ids({"REDIS_URL": "redis://:s3cret@127.0.0.1:port/0"})
    assert "s3cret" not in message and "not a Redis URL" in message


def test_a_backend_without_the_app_installed_is_a_warning():
    with override_settings(INSTALLED_APPS=["shop"]):
        found = [m.id for m in checks.run_checks() if m.id and m.id.startswith("redflow.")]
    assert found == ["redflow.W001"]


@pytest.mark.parametrize("command", [["check"], ["redflow_worker", "-c", "5"]])
def test_manage_py_check_and_the_worker_command_stop_on_a_bad_setting_naming_it(worker_env, tmp_path, command):
    env = {**worker_env, "REDFLOW_TEST_OPTIONS": json.dumps({"PREFIX": "x"})}
    status, output = Workers(env, tmp_path).run(*command, manage=True)
    assert status != 0
    assert "redflow.E001" in output and 'TASKS["default"]["OPTIONS"] has no REDIS_URL' in output
