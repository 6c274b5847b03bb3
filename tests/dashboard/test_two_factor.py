"""Two-factor dashboard logins: set up TOTP, log in with a code or a recovery code, required
for support and ops by a setting and for a merchant's team by its owner, reset by ops."""

import base64
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django_otp.oath import totp

from merchants.models import AuditAction, AuditLogEntry, Authenticator

pytestmark = pytest.mark.django_db

PASSWORD = "pw-123456-staff"


def code_for(device: Authenticator, *, steps_ahead: int = 0) -> str:
    return f"{totp(device.bin_key, t0=device.t0, step=device.step, drift=steps_ahead):06d}"


def set_up(client: Client) -> tuple[Authenticator, list[str]]:
    page = client.get("/admin/two-factor/setup/").content.decode()
    assert 'id="totp-secret"' in page
    device = Authenticator.objects.get(confirmed=False)
    qr = re.search(r'id="totp-qr" src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)
    assert device.config_url.encode() not in base64.b64decode(qr)  # drawn, not written out
    assert b"<svg" in base64.b64decode(qr)
    done = client.post("/admin/two-factor/setup/", {"token": code_for(device)})
    codes = re.findall(r'class="recovery-code"><code>(\w+)</code>', done.content.decode())
    return device, codes


def fresh_login(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


def test_an_owner_sets_up_totp_and_then_logs_in_with_a_code(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-a")
    device, codes = set_up(owner)
    assert len(codes) == 10
    device.refresh_from_db()
    assert device.confirmed

    later = fresh_login("owner-a")
    asked = later.get("/admin/payments/payin/")
    assert asked.status_code == 302 and "/admin/two-factor/verify/" in asked["Location"]
    wrong = later.post("/admin/two-factor/verify/", {"token": "000000"})
    assert "That code is not right" in wrong.content.decode()
    assert later.get("/admin/").status_code == 302

    device.refresh_from_db()
    assert device.throttling_failure_count == 1  # a wrong code slows the next tries down
    device.throttle_reset()  # as when its second has passed
    ok = later.post(
        "/admin/two-factor/verify/",
        {"token": code_for(device, steps_ahead=1), "next": "/admin/payments/payin/"},
    )
    assert ok.status_code == 302 and ok["Location"] == "/admin/payments/payin/"
    assert later.get("/admin/").status_code == 200
    assert AuditLogEntry.objects.filter(
        merchant=merchant, action=AuditAction.STAFF_CHANGED, detail__change="two_factor.enabled"
    ).exists()


def test_a_recovery_code_lets_a_user_in_once(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-b")
    _, codes = set_up(owner)

    first = fresh_login("owner-b")
    assert first.post("/admin/two-factor/verify/", {"token": codes[0]}).status_code == 302
    assert first.get("/admin/").status_code == 200

    second = fresh_login("owner-b")
    again = second.post("/admin/two-factor/verify/", {"token": codes[0]})
    assert "That code is not right" in again.content.decode()
    assert second.get("/admin/").status_code == 302


def test_support_must_set_up_a_second_factor_when_the_setting_requires_it(staff_client, settings):
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = True
    support = staff_client(support=True, username="support-a")

    # a password alone neither enrols nor reaches a page: the enrolment link does
    # (tests/dashboard/test_invites.py)
    assert support.get("/admin/transfers/transfer/").status_code == 403
    assert support.get("/admin/two-factor/setup/").status_code == 403
    assert not Authenticator.objects.exists()


def test_support_may_skip_it_when_the_setting_is_off(staff_client, settings):
    settings.DASHBOARD_REQUIRE_2FA_FOR_STAFF = False
    support = staff_client(support=True, username="support-b")
    assert support.get("/admin/transfers/transfer/").status_code == 200


def test_an_owner_can_require_it_for_the_whole_team(merchant, staff_client):
    viewer = staff_client(merchant=merchant, role="viewer", username="viewer-a")
    assert viewer.get("/admin/payments/payin/").status_code == 200

    merchant.require_two_factor = True
    merchant.save(update_fields=["require_two_factor"])

    sent = viewer.get("/admin/payments/payin/")
    assert sent.status_code == 302 and sent["Location"] == "/admin/two-factor/setup/"


def test_ops_reset_a_lost_second_factor(merchant, staff_client, capsys):
    owner = staff_client(merchant=merchant, role="owner", username="owner-c")
    set_up(owner)

    call_command("reset_two_factor", "owner-c", "--json")

    assert json.loads(capsys.readouterr().out) == {"username": "owner-c", "devices_removed": 2}
    assert fresh_login("owner-c").get("/admin/").status_code == 200


def test_a_password_alone_cannot_enrol_another_authenticator_to_get_in(merchant, staff_client):
    """The setup page is reached before the code is asked: with a second factor on, a stolen
    password must not enrol the thief's own authenticator and pass as verified."""
    owner = staff_client(merchant=merchant, role="owner", username="owner-d")
    device, codes = set_up(owner)

    thief = fresh_login("owner-d")
    page = thief.get("/admin/two-factor/setup/")
    assert page.status_code == 302 and "/admin/two-factor/verify/" in page["Location"]
    pending = Authenticator.objects.filter(user=device.user, confirmed=False).first()
    token = code_for(pending) if pending else "123456"
    thief.post("/admin/two-factor/setup/", {"token": token})

    assert thief.get("/admin/").status_code == 302
    assert list(Authenticator.objects.filter(user=device.user)) == [device]
    owner_again = fresh_login("owner-d")  # the owner's recovery codes were not replaced
    assert owner_again.post("/admin/two-factor/verify/", {"token": codes[0]}).status_code == 302


def test_after_the_code_a_secure_login_goes_on_over_https_only(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-https")
    device, _codes = set_up(owner)
    page = "/admin/payments/payin/"

    for next_url, expected in [
        (f"http://testserver{page}", "/admin/"),  # plain http to our own host: not followed
        (f"https://testserver{page}", f"https://testserver{page}"),
        (page, page),
    ]:
        later = Client()
        assert later.login(username="owner-https", password=PASSWORD)
        device.refresh_from_db()
        device.throttle_reset()
        device.last_t = -1  # each login may use the current code again
        device.save()
        ok = later.post(
            "/admin/two-factor/verify/",
            {"token": code_for(device), "next": next_url},
            secure=True,
        )
        assert ok.status_code == 302 and ok["Location"] == expected, next_url
