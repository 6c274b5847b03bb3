"""Owners manage their own team in the dashboard: invite, change a role, remove; every change
is in the merchant's audit log; nobody else's team is reachable."""

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from merchants.models import AuditAction, AuditLogEntry, MerchantMembership

pytestmark = pytest.mark.django_db

ADD = "/admin/merchants/merchantmembership/add/"
NEW_PASSWORD = "a-long-new-Passw0rd"


def invite(owner: Client, username: str, role: str = "developer") -> str:
    page = owner.post(ADD, {"username": username, "email": f"{username}@example.com", "role": role})
    assert page.status_code == 200, page.content[:500]
    return re.search(r'id="invite-url">([^<]+)<', page.content.decode()).group(1)


def accept(url: str) -> Client:
    teammate = Client()
    choose = teammate.get(url)
    assert choose.status_code == 302  # Django swaps the token for a session-held one
    done = teammate.post(
        choose["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert done.status_code == 302 and done["Location"] == "/admin/login/"
    return teammate


def changes(merchant) -> list[dict]:
    return list(
        AuditLogEntry.objects.filter(merchant=merchant, action=AuditAction.STAFF_CHANGED)
        .order_by("id")
        .values_list("detail", flat=True)
    )


def test_an_owner_invites_a_teammate_who_chooses_a_password_and_logs_in(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-1")

    url = invite(owner, "kofi")
    accept(url)

    membership = MerchantMembership.objects.get(user__username="kofi")
    assert (membership.merchant, membership.role) == (merchant, "developer")
    assert Client().login(username="kofi", password=NEW_PASSWORD)
    assert changes(merchant)[-1]["change"] == "invited"
    # the link works once
    assert "invite-expired" in Client().get(url, follow=True).content.decode()


def test_an_owner_changes_a_role_but_never_removes_the_last_owner(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-2")
    accept(invite(owner, "ama", role="viewer"))
    ama = MerchantMembership.objects.get(user__username="ama")
    me = MerchantMembership.objects.get(user__username="owner-2")

    owner.post(f"/admin/merchants/merchantmembership/{ama.pk}/change/", {"role": "developer"})
    refused = owner.post(
        f"/admin/merchants/merchantmembership/{me.pk}/change/", {"role": "viewer"}, follow=True
    )

    ama.refresh_from_db()
    me.refresh_from_db()
    assert ama.role == "developer"
    assert me.role == "owner"
    assert "at least one owner" in refused.content.decode()
    assert {"change": "role", "from": "viewer", "to": "developer"} in changes(merchant)


def test_an_owner_removes_a_teammate_whose_login_stops_at_once(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-3")
    teammate = accept(invite(owner, "yao"))
    assert teammate.login(username="yao", password=NEW_PASSWORD)
    yao = MerchantMembership.objects.get(user__username="yao")

    owner.post(f"/admin/merchants/merchantmembership/{yao.pk}/delete/", {"post": "yes"})

    assert not MerchantMembership.objects.filter(pk=yao.pk).exists()
    assert not get_user_model().objects.get(username="yao").is_active
    assert teammate.get("/admin/").status_code == 302  # logged out
    assert changes(merchant)[-1] == {"change": "removed"}


def test_developers_and_viewers_cannot_change_the_team(merchant, staff_client):
    developer = staff_client(merchant=merchant, role="developer", username="dev-1")
    assert developer.get(ADD).status_code == 403
    assert developer.post(ADD, {"username": "x", "role": "owner"}).status_code == 403
    assert not get_user_model().objects.filter(username="x").exists()


def test_an_owner_never_reaches_another_merchants_team(merchant, other_merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-4")
    staff_client(merchant=other_merchant, role="viewer", username="theirs")
    theirs = MerchantMembership.objects.get(user__username="theirs")

    assert owner.get(f"/admin/merchants/merchantmembership/{theirs.pk}/change/").status_code == 404
    owner.post(f"/admin/merchants/merchantmembership/{theirs.pk}/delete/", {"post": "yes"})
    assert MerchantMembership.objects.filter(pk=theirs.pk).exists()
    assert "theirs" not in owner.get("/admin/merchants/merchantmembership/").content.decode()


def test_an_owner_requires_two_factor_for_the_team(merchant, staff_client):
    owner = staff_client(merchant=merchant, role="owner", username="owner-5")

    page = f"/admin/merchants/merchant/{merchant.pk}/change/"
    management = dict(
        re.findall(r'name="([\w-]+_FORMS)"[^>]*value="(\d+)"', owner.get(page).content.decode())
    )
    owner.post(page, {**management, "require_two_factor": "on"})

    merchant.refresh_from_db()
    assert merchant.require_two_factor
    assert changes(merchant)[-1] == {"change": "require_two_factor", "to": True}


def test_an_invitation_links_token_is_not_written_to_the_access_log(merchant, staff_client):
    """gunicorn logs each request's path: the link's token in it would let whoever reads the
    logs choose the teammate's password (an owner's, for an owner's invitation) first."""
    from urllib.parse import urlsplit

    from tests.logs import console_lines

    owner = staff_client(merchant=merchant, role="owner", username="owner-log")
    path = urlsplit(invite(owner, "new-owner", role="owner")).path
    token = path.rstrip("/").rsplit("/", 1)[1]
    with console_lines() as lines:
        # the line gunicorn.access writes (config.gunicorn_conf.access_log_format)
        logging.getLogger("gunicorn.access").info(
            '%(h)s "%(m)s %(U)s %(H)s" %(s)s',
            {"h": "10.0.0.1", "m": "GET", "U": path, "H": "HTTP/1.1", "s": "302"},
        )
    assert token not in lines[0]["message"]
    assert lines[0]["message"].startswith('10.0.0.1 "GET /admin/invite/')
    accept(f"http://testserver{path}")  # the link itself still works
