import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from customers.models import Customer
from merchants.models import MerchantMembership

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
        "s3cret-pw-staff",
        "--merchant",
        str(merchant.id),
        "--role",
        "owner",
    )
    assert data == {"username": "amina", "merchant_id": str(merchant.id), "role": "owner"}
    client = Client()
    assert client.login(username="amina", password="s3cret-pw-staff")
    assert client.get("/admin/").status_code == 200


def test_create_support_user():
    data = _run("create_staff_user", "sam", "--password", "support-login-pw", "--support")
    assert data == {"username": "sam", "merchant_id": None, "role": "support"}


def test_create_staff_user_needs_a_merchant_and_role_or_support():
    with pytest.raises(CommandError):
        call_command("create_staff_user", "x", "--password", "support-login-pw")


def test_seed_demo_prints_a_working_dashboard_login():
    data = _run("seed_demo")
    client = Client()
    assert client.login(username=data["dashboard_username"], password=data["dashboard_password"])


@pytest.mark.parametrize(
    "username,password,message",
    [
        ("", "a-long-enough-password", "Enter a valid username"),
        ("bad user!", "a-long-enough-password", "Enter a valid username"),
        ("nadia", "", "too short"),
        ("nadia", "x", "too short"),
        ("nadia", "password1234", "too common"),
        ("nadia", "123456789012345", "entirely numeric"),
    ],
)
def test_create_staff_user_refuses_a_bad_username_or_a_weak_password(
    merchant, username, password, message
):
    args = ["--merchant", str(merchant.id), "--role", "viewer"]
    with pytest.raises(CommandError, match=message):
        call_command("create_staff_user", username, "--password", password, *args)
    assert not get_user_model().objects.exists()


def test_an_ops_login_is_not_turned_into_merchant_staff(merchant, other_merchant):
    """Its superuser flag would stay: a "viewer of B" seeing every merchant's data."""
    ops = get_user_model().objects.create_superuser("amina", "a@example.com", "old-ops-password")
    Customer.objects.create(merchant=merchant, first_name="Awa", last_name="Diallo")
    args = ["--password", "a-new-long-password", "--merchant", str(other_merchant.id)]
    with pytest.raises(CommandError, match="ops login"):
        call_command("create_staff_user", "amina", *args, "--role", "viewer")
    with pytest.raises(CommandError, match="ops login"):
        call_command("create_staff_user", "amina", "--password", "a-new-long-password", "--support")
    ops.refresh_from_db()
    assert ops.check_password("old-ops-password")
    assert not MerchantMembership.objects.filter(user=ops).exists()


def test_seed_demo_refused_a_dashboard_login_changes_nothing():
    """seed_demo issued its API key, then failed on the demo login (an ops login of that name):
    a working key whose secret was never printed."""
    from merchants.models import ApiKey, AuditLogEntry, Merchant

    get_user_model().objects.create_superuser("demo-owner", "o@example.com", "old-ops-password")
    with pytest.raises(CommandError, match="ops login"):
        call_command("seed_demo", stdout=StringIO())
    assert not ApiKey.objects.exists()
    assert not AuditLogEntry.objects.exists()
    assert not Merchant.objects.exists()


def test_create_ops_user_lands_on_the_ops_home_and_sees_every_merchant(merchant, other_merchant):
    data = _run("create_staff_user", "olu", "--password", "ops-login-passphrase", "--ops")
    assert data == {"username": "olu", "merchant_id": None, "role": "ops"}
    user = get_user_model().objects.get(username="olu")
    assert (user.is_superuser, user.is_staff, user.groups.exists()) == (True, True, False)
    client = Client()
    assert client.login(username="olu", password="ops-login-passphrase")
    home = client.get("/admin/").content.decode()
    assert 'id="ledger-check"' in home  # the ops home
    # re-run: a new password, still ops; a support login promoted to ops loses its group
    _run("create_staff_user", "olu", "--password", "another-ops-passphrase", "--ops")
    _run("create_staff_user", "sam", "--password", "support-login-pw", "--support")
    _run("create_staff_user", "sam", "--password", "support-login-pw", "--ops")
    sam = get_user_model().objects.get(username="sam")
    assert sam.is_superuser and not sam.groups.exists()
    assert client.login(username="olu", password="another-ops-passphrase")


@pytest.mark.parametrize(
    "extra", [["--support"], ["--role", "viewer"], ["--merchant", "x", "--role", "owner"]]
)
def test_create_ops_user_takes_no_other_assignment(extra):
    with pytest.raises(CommandError, match="--ops"):
        call_command(
            "create_staff_user", "olu", "--password", "ops-login-passphrase", "--ops", *extra
        )
    assert not get_user_model().objects.exists()
