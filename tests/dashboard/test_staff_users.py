import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

pytestmark = pytest.mark.django_db


def _run(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_create_staff_user_for_a_merchant_can_log_in(merchant):
    data = _run(
        "create_staff_user",
        "amina",
        "--password",
        "s3cret-pw",
        "--merchant",
        str(merchant.id),
        "--role",
        "owner",
    )
    assert data == {"username": "amina", "merchant_id": str(merchant.id), "role": "owner"}
    client = Client()
    assert client.login(username="amina", password="s3cret-pw")
    assert client.get("/admin/").status_code == 200


def test_create_support_user():
    data = _run("create_staff_user", "sam", "--password", "pw", "--support")
    assert data == {"username": "sam", "merchant_id": None, "role": "support"}


def test_create_staff_user_needs_a_merchant_and_role_or_support():
    with pytest.raises(CommandError):
        call_command("create_staff_user", "x", "--password", "pw")


def test_seed_demo_prints_a_working_dashboard_login():
    data = _run("seed_demo")
    client = Client()
    assert client.login(username=data["dashboard_username"], password=data["dashboard_password"])
