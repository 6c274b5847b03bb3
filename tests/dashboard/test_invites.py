"""Invites and enrolment links are their own single-use records: no URL sets the password of a
login without an open invite of its own, and where the settings require a second factor
(support and ops in production) a password alone neither enrols one nor reaches a page."""

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django_otp.oath import totp

from merchants import services
from merchants.models import Authenticator, StaffInvite
from tests.dashboard.test_team import ADD, NEW_PASSWORD, accept, invite

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456-staff"
CHOSEN = "an-attackers-Passw0rd"


def code_for(device: Authenticator) -> str:
    return f"{totp(device.bin_key, t0=device.t0, step=device.step):06d}"


@pytest.fixture(params=["development", "production"])
def any_settings(request, settings):
    """The dashboard under `make run`'s settings and the production ones (second factor
    required for support and ops)."""
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = request.param == "production"
    return request.param


def reset_link(user) -> str:
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return f"/admin/invite/{uid}/{default_token_generator.make_token(user)}/"


def try_to_set_password(url: str) -> Client:
    client = Client()
    first = client.get(url)
    assert first.status_code == 404
    assert "invite-expired" in first.content.decode()
    uid = url.split("/")[3]
    step = f"/admin/invite/{uid}/choose-password/"
    for body in ({"new_password1": CHOSEN, "new_password2": CHOSEN}, {"password": CHOSEN}):
        assert client.post(step, body).status_code == 404
    return client


def test_a_reset_token_sets_the_password_of_no_account(any_settings, merchant, staff_client):
    ops = get_user_model().objects.create_superuser("ops-1", password=PASSWORD)
    staff_client(merchant=merchant, role="owner", username="owner-1")
    staff_client(support=True, username="support-1")
    users = get_user_model().objects.filter(username__in=["ops-1", "owner-1", "support-1"])
    # a teammate with an open invite: a reset token for it is no invite either
    owner = Client()
    assert owner.login(username="owner-1", password=PASSWORD)
    invite(owner, "invited-1")
    invited = get_user_model().objects.get(username="invited-1")

    for user in [*users, invited, ops]:
        before = user.password
        try_to_set_password(reset_link(user))
        user.refresh_from_db()
        assert user.password == before
        assert not Client().login(username=user.username, password=CHOSEN)


def test_an_invite_sets_one_password_once(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-2")
    url = invite(owner, "kofi")
    assert "/admin/invite/" in url
    teammate = accept(url)
    assert Client().login(username="kofi", password=NEW_PASSWORD)

    # the same link again, and the session that used it: refused, nothing changed
    try_to_set_password(re.sub(r"^https?://[^/]+", "", url))
    step = teammate.post(
        re.sub(r"/[^/]+/$", "/choose-password/", re.sub(r"^https?://[^/]+", "", url)),
        {"new_password1": CHOSEN, "new_password2": CHOSEN},
    )
    assert step.status_code == 404
    assert Client().login(username="kofi", password=NEW_PASSWORD)
    assert StaffInvite.objects.get(user__username="kofi").used_at is not None


def test_an_expired_invite_is_refused(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-3")
    url = re.sub(r"^https?://[^/]+", "", invite(owner, "ama"))
    StaffInvite.objects.filter(user__username="ama").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    try_to_set_password(url)
    assert not get_user_model().objects.get(username="ama").has_usable_password()


def test_an_invite_works_for_its_own_login_only(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-4")
    url = re.sub(r"^https?://[^/]+", "", invite(owner, "yao"))
    other = get_user_model().objects.get(username="owner-4")
    token = url.rstrip("/").rsplit("/", 1)[1]
    try_to_set_password(f"/admin/invite/{urlsafe_base64_encode(force_bytes(other.pk))}/{token}/")
    assert Client().login(username="owner-4", password=PASSWORD)


def test_create_staff_user_without_a_password_prints_an_invite(merchant, capsys):
    call_command(
        "create_staff_user", "esi", "--merchant", str(merchant.id), "--role", "viewer", "--json"
    )
    out = json.loads(capsys.readouterr().out)
    assert not get_user_model().objects.get(username="esi").has_usable_password()
    assert not Client().login(username="esi", password="")
    accept(out["invite_path"])
    assert Client().login(username="esi", password=NEW_PASSWORD)


def enrol_with_link(path: str, *, password: str | None = None, new_password: str | None = None):
    client = Client()
    step = client.get(path)
    assert step.status_code == 302
    page = client.get(step["Location"])
    assert 'id="totp-secret"' in page.content.decode()
    device = Authenticator.objects.get(user__username=page.context["form"].invite.user.username)
    body = {"token": code_for(device)}
    if password:
        body["password"] = password
    if new_password:
        body |= {"new_password1": new_password, "new_password2": new_password}
    done = client.post(step["Location"], body)
    assert done.status_code == 200, done.content[:300]
    codes = re.findall(r'class="recovery-code"><code>(\w+)</code>', done.content.decode())
    assert len(codes) == 10
    return client


PAGES = [
    "/admin/",
    "/admin/two-factor/setup/",
    "/admin/transfers/transfer/",
    "/admin/payments/payin/",
    "/admin/password_change/",
]


def test_under_production_settings_a_password_alone_never_enrols(settings, capsys):
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = True
    call_command("create_staff_user", "support-9", "--support", "--password", PASSWORD, "--json")
    link = json.loads(capsys.readouterr().out)["enrolment_path"]
    get_user_model().objects.create_superuser("ops-9", password=PASSWORD)

    for username in ("support-9", "ops-9"):
        client = Client()
        assert client.login(username=username, password=PASSWORD)
        for page in PAGES:
            assert client.get(page).status_code == 403, page
        client.post("/admin/two-factor/setup/", {"token": "123456"})
        assert not Authenticator.objects.filter(user__username=username).exists()

    # the enrolment link, with the password and the authenticator's code: in, verified
    client = enrol_with_link(link, password=PASSWORD)
    assert client.get("/admin/transfers/transfer/").status_code == 200
    assert Client().get(link).status_code == 404  # once

    # ops reset it (a lost phone): a new link, and the password alone is stuck again
    call_command("reset_two_factor", "support-9", "--json")
    link = json.loads(capsys.readouterr().out)["enrolment_path"]
    stuck = Client()
    assert stuck.login(username="support-9", password=PASSWORD)
    assert stuck.get("/admin/").status_code == 403
    assert enrol_with_link(link, password=PASSWORD).get("/admin/").status_code == 200


def test_an_enrolment_link_wants_the_logins_password_too(settings, capsys):
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = True
    call_command("create_staff_user", "support-8", "--support", "--password", PASSWORD, "--json")
    link = json.loads(capsys.readouterr().out)["enrolment_path"]
    client = Client()
    step = client.get(link)["Location"]
    client.get(step)
    device = Authenticator.objects.get(user__username="support-8")
    refused = client.post(step, {"password": "not-the-password", "token": code_for(device)})
    assert refused.status_code == 200 and "That password is not right" in refused.content.decode()
    assert not Authenticator.objects.filter(user__username="support-8", confirmed=True).exists()


def test_an_invited_support_login_chooses_a_password_and_enrols_at_once(settings, capsys):
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = True
    call_command("create_staff_user", "support-7", "--support", "--json")
    link = json.loads(capsys.readouterr().out)["invite_path"]
    client = enrol_with_link(link, new_password=NEW_PASSWORD)
    assert client.get("/admin/transfers/transfer/").status_code == 200
    assert services  # the login's password is the one chosen
    assert Client().login(username="support-7", password=NEW_PASSWORD)


def test_the_team_page_shows_the_invite_link_once_per_invite(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-5")
    page = owner.post(ADD, {"username": "abena", "email": "", "role": "viewer"})
    assert 'id="invite-url"' in page.content.decode()
    stored = StaffInvite.objects.get(user__username="abena")
    token = re.search(r'id="invite-url">[^<]+/([^/<]+)/<', page.content.decode()).group(1)
    assert token not in stored.token_hash and len(stored.token_hash) == 64


PRODUCTION_PROBE = """
import json
import django
django.setup()
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

user = get_user_model().objects.create_superuser("probe-ops", password="pw-123456-staff")
try:
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    client = Client()
    url = f"/admin/invite/{uid}/{default_token_generator.make_token(user)}/"
    first = client.get(url, secure=True)
    body = {"new_password1": "an-attackers-Passw0rd", "new_password2": "an-attackers-Passw0rd"}
    second = client.post(f"/admin/invite/{uid}/choose-password/", body, secure=True)
    user.refresh_from_db()
    print(json.dumps({
        "statuses": [first.status_code, second.status_code],
        "changed": user.check_password("an-attackers-Passw0rd"),
    }))
finally:
    user.delete()
"""


def test_under_the_production_settings_a_reset_token_sets_nothing_either(django_db_setup):
    """The same probe in a process on config.settings_production (its own SECRET_KEY): the
    real reset token of a superuser is no invite."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cryptography.fernet import Fernet
    from django.db import connection

    database = {**connection.settings_dict}
    login = database["USER"] + (f":{database['PASSWORD']}" if database["PASSWORD"] else "")
    url = (
        f"postgres://{login}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{database['NAME']}"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    environment |= {
        "DJANGO_SETTINGS_MODULE": "config.settings_production",
        "SECRET_KEY": Fernet.generate_key().decode() * 2,
        "WEBHOOK_SECRETS_KEYS": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "testserver",
        "DATABASE_URL": url,
        "REDIS_URL": os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL") or "redis://127.0.0.1:6379/1",
    }
    result = subprocess.run(
        [sys.executable, "-c", PRODUCTION_PROBE],
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"statuses": [404, 404], "changed": False}
