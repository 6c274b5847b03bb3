"""Dashboard logins through the real login page: failed attempts counted in Redis per username
and per address (shared by every client, as by every gunicorn worker), refused at the limit
without a password check, lifted when the counters expire; what is logged; the session's
lifetime; a password change ending the other sessions."""

import io
import json
import logging
import re
import socket
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from core import shared_cache
from merchants import logins, services
from merchants.models import AuditLogEntry
from tests.locks import at_once

PASSWORD = "pw-123456-staff"
WRONG = "not-the-password-42"
REFUSED = "Too many failed logins."
WRONG_PASSWORD = "Please enter the correct username and password"

pytestmark = pytest.mark.django_db


@pytest.fixture
def amina(merchant):
    return services.staff_user_create(
        username="amina", password=PASSWORD, merchant=merchant, role="owner"
    )


def browser(address: str = "127.0.0.1", **headers) -> Client:
    return Client(REMOTE_ADDR=address, **headers)


def log_in(client: Client, username: str, password: str):
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
    )


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def counter(username: str = "", address: str = "127.0.0.1") -> tuple[str, str]:
    """The Redis keys of the username's and the address's counters."""
    names = logins.counter_names(username=username, address=address)
    return tuple(shared_cache.cache_key(name) for name in names)


def redis():
    return shared_cache.redis_client()


@pytest.fixture
def password_checks():
    """The usernames whose password was checked and found wrong (Django's own signal)."""
    checked: list[str] = []

    def record(sender, credentials, request=None, **kwargs):
        checked.append(credentials["username"])

    user_login_failed.connect(record)
    yield checked
    user_login_failed.disconnect(record)


# --- throttling -----------------------------------------------------------------------------


def test_failures_of_one_username_from_two_browsers_share_one_count_and_lock_it(
    amina, password_checks
):
    first, second = browser("10.0.0.1"), browser("10.0.0.2")
    for _ in range(3):
        assert WRONG_PASSWORD in log_in(first, "amina", WRONG).content.decode()
    for _ in range(2):  # any case: the same username
        assert WRONG_PASSWORD in log_in(second, "AMINA", WRONG).content.decode()

    page = log_in(second, "amina", PASSWORD)  # the right password, too late

    assert page.status_code == 200 and REFUSED in page.content.decode()
    assert "try again in 15 minutes" in page.content.decode()
    assert not logged_in(second)
    assert len(password_checks) == 5  # the refused attempt checked no password
    assert int(redis().get(counter("amina", "10.0.0.1")[0])) == 5


def test_a_refused_attempt_counts_nothing_and_the_lock_lifts_when_its_key_expires(
    amina, password_checks
):
    client = browser()
    for _ in range(5):
        log_in(client, "amina", WRONG)
    username_key, _ = counter("amina")
    ttl = redis().ttl(username_key)

    for _ in range(3):
        assert REFUSED in log_in(client, "amina", PASSWORD).content.decode()

    assert int(redis().get(username_key)) == 5  # refusals neither count nor check
    assert len(password_checks) == 5
    assert 0 < redis().ttl(username_key) <= ttl <= 900  # it lifts on its own, not later
    redis().expire(username_key, 0)  # the window has passed
    assert log_in(client, "amina", PASSWORD).status_code == 302
    assert logged_in(client)


@pytest.mark.django_db(transaction=True)
def test_attempts_sent_at_once_reach_the_password_check_no_more_than_the_limit(
    merchant, password_checks
):
    """Each attempt is counted before its password is checked, in one step with the test of
    the limit: ten at once (ten gunicorn workers) check five passwords, not ten."""
    services.staff_user_create(username="amina", password=PASSWORD, merchant=merchant, role="owner")
    pages: list[str] = []

    at_once(lambda: pages.append(log_in(browser(), "amina", WRONG).content.decode()), runs=10)

    assert len(password_checks) == 5
    assert sum(REFUSED in page for page in pages) == 5
    assert int(redis().get(counter("amina")[0])) == 5


def test_the_refusal_does_not_say_whether_the_username_exists(amina):
    pages = {}
    for username in ("amina", "nobody-here"):
        client = browser()
        for _ in range(5):
            log_in(client, username, WRONG)
        pages[username] = log_in(client, username, WRONG).content.decode()
        redis().delete(*counter(username))  # the address's count must not decide the next one

    notes = {
        name: re.findall(r'class="errornote[^"]*">\s*(.*?)\s*</(?:p|div)>', page, re.S)
        for name, page in pages.items()
    }
    assert [note for note in notes["amina"] if REFUSED in note]
    assert notes["amina"] == notes["nobody-here"]


def test_failures_from_one_address_lock_it_for_every_username_and_only_it(
    amina, settings, password_checks
):
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    attacker = browser("203.0.113.9")
    for username in ("root", "admin", "support"):
        log_in(attacker, username, WRONG)

    assert REFUSED in log_in(attacker, "amina", PASSWORD).content.decode()
    assert not logged_in(attacker)
    assert len(password_checks) == 3
    elsewhere = browser("198.51.100.4")
    assert log_in(elsewhere, "amina", PASSWORD).status_code == 302


def test_a_success_gives_back_only_its_own_count_of_the_address(amina, settings):
    """Behind one office address, a colleague logging in does not wipe an attacker's failures."""
    settings.LOGIN_FAILURES_PER_ADDRESS = 3
    office = browser("192.0.2.10")
    log_in(office, "root", WRONG)
    log_in(office, "admin", WRONG)
    _, address_key = counter(address="192.0.2.10")

    assert log_in(browser("192.0.2.10"), "amina", PASSWORD).status_code == 302

    assert int(redis().get(address_key)) == 2
    log_in(office, "support", WRONG)
    assert REFUSED in log_in(office, "ops", WRONG).content.decode()


def test_a_success_clears_the_usernames_failures(amina):
    client = browser()
    for _ in range(4):
        log_in(client, "amina", WRONG)
    username_key, _ = counter("amina")

    assert log_in(client, "amina", PASSWORD).status_code == 302

    assert redis().get(username_key) is None


def test_behind_a_load_balancer_the_address_it_appended_is_counted(amina, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    # both come through the balancer (REMOTE_ADDR); one forges an entry to the left
    attacker = browser("10.1.0.1", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.9")
    for forged in ("5.6.7.8", "9.9.9.9"):
        attacker.defaults["HTTP_X_FORWARDED_FOR"] = f"{forged}, 203.0.113.9"
        log_in(attacker, "root", WRONG)
    colleague = browser("10.1.0.1", HTTP_X_FORWARDED_FOR="198.51.100.20")

    assert REFUSED in log_in(attacker, "admin", WRONG).content.decode()
    assert log_in(colleague, "amina", PASSWORD).status_code == 302
    assert redis().get(counter(address="203.0.113.9")[1]) == b"2"


def test_without_a_trusted_proxy_x_forwarded_for_is_ignored(amina, settings):
    """TRUSTED_PROXY_COUNT is 0 unless set, under the production settings too: a spoofed
    X-Forwarded-For neither escapes nor moves the per-address lock."""
    assert settings.TRUSTED_PROXY_COUNT == 0
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    for forged in ("5.6.7.8", "9.9.9.9"):
        log_in(browser("203.0.113.9", HTTP_X_FORWARDED_FOR=forged), "root", WRONG)

    page = log_in(browser("203.0.113.9", HTTP_X_FORWARDED_FOR="1.1.1.1"), "amina", PASSWORD)

    assert REFUSED in page.content.decode()
    assert redis().get(counter(address="203.0.113.9")[1]) == b"2"
    for forged in ("5.6.7.8", "9.9.9.9", "1.1.1.1"):
        assert redis().get(counter(address=forged)[1]) is None


def test_an_ipv6_client_is_counted_by_its_64(amina, settings):
    settings.LOGIN_FAILURES_PER_ADDRESS = 2
    log_in(browser("2001:db8:1:2::1"), "root", WRONG)
    log_in(browser("2001:db8:1:2:ffff::9"), "admin", WRONG)

    assert REFUSED in log_in(browser("2001:db8:1:2::77"), "amina", PASSWORD).content.decode()
    assert log_in(browser("2001:db8:1:3::1"), "amina", PASSWORD).status_code == 302


def test_without_redis_the_counts_are_kept_in_djangos_cache(amina, settings, password_checks):
    """Embedded mode (`make run` without REDIS_URL): one process, its own cache."""
    settings.REDIS_URL = ""
    client = browser()
    for _ in range(5):
        log_in(client, "amina", WRONG)

    assert REFUSED in log_in(client, "amina", PASSWORD).content.decode()
    assert len(password_checks) == 5


# --- what is recorded -----------------------------------------------------------------------


def test_failed_and_refused_logins_are_logged_with_username_and_address_never_the_password(
    amina, caplog
):
    client = browser("198.51.100.7")
    with caplog.at_level(logging.DEBUG):
        for _ in range(5):
            log_in(client, "amina", WRONG)
        log_in(client, "amina", PASSWORD)
        shared_cache.redis_client().delete(*counter("amina", "198.51.100.7"))
        log_in(client, "amina", PASSWORD)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings.count("Dashboard login failed: username 'amina' from 198.51.100.7") == 5
    assert (
        warnings.count(
            "Dashboard login refused, too many failures: username 'amina' from 198.51.100.7"
        )
        == 1
    )
    assert "Dashboard login: username 'amina' from 198.51.100.7" in caplog.text
    for record in caplog.records:
        text = f"{record.getMessage()} {record.args!r} {record.__dict__!r}"
        assert WRONG not in text and PASSWORD not in text
    for entry in AuditLogEntry.objects.all():
        assert WRONG not in repr(entry.detail) and PASSWORD not in repr(entry.detail)


def test_a_username_that_is_nobodys_is_logged_by_its_length_not_its_text(amina, caplog):
    """A password typed in the username field must not reach the logs."""
    client = browser("198.51.100.8")
    with caplog.at_level(logging.DEBUG):
        log_in(client, PASSWORD, PASSWORD)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    unknown = f"unknown ({len(PASSWORD)} characters)"
    assert warnings == [f"Dashboard login failed: username {unknown} from 198.51.100.8"]
    assert PASSWORD not in caplog.text


# --- Redis down -----------------------------------------------------------------------------


@pytest.fixture
def redis_down(settings):
    """REDIS_URL pointing at a port nothing listens on (a stopped Redis)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    shared_cache._clients.clear()
    yield
    shared_cache._clients.clear()
    shared_cache._paused_until = 0.0


def test_with_redis_down_logins_are_checked_uncounted_and_that_is_logged_loudly(
    amina, redis_down, caplog, password_checks
):
    """Fail open (docs/decisions.md): an outage of the counter must not lock ops and support
    out of the dashboard; each failure is still logged, and the outage at ERROR."""
    client = browser()
    for _ in range(6):
        assert WRONG_PASSWORD in log_in(client, "amina", WRONG).content.decode()

    assert log_in(client, "amina", PASSWORD).status_code == 302
    assert logged_in(client)
    assert len(password_checks) == 6
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("login throttling is OFF" in message for message in errors)
    assert caplog.text.count("Dashboard login failed: username 'amina'") == 6


# --- sessions -------------------------------------------------------------------------------


def test_a_session_ends_twelve_hours_after_login_however_busy(amina):
    client = browser()
    before = timezone.now()
    assert log_in(client, "amina", PASSWORD).status_code == 302
    after = timezone.now()
    lifetime = timedelta(hours=12)
    session = Session.objects.get()
    assert before + lifetime <= session.expire_date <= after + lifetime
    assert int(client.cookies["sessionid"]["max-age"]) <= 12 * 3600

    stored = client.session
    stored["touched"] = True  # a later write of the session
    stored.save()

    assert Session.objects.get().expire_date == session.expire_date
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))  # time is up
    assert client.get("/admin/").status_code == 302


def test_the_session_lifetime_is_a_setting(amina, settings):
    settings.DASHBOARD_SESSION_SECONDS = 3600
    client = browser()
    before = timezone.now()
    log_in(client, "amina", PASSWORD)
    assert Session.objects.get().expire_date <= timezone.now() + timedelta(hours=1)
    assert Session.objects.get().expire_date >= before + timedelta(hours=1)


def test_changing_ones_password_ends_ones_other_sessions_and_keeps_this_one(amina):
    here, elsewhere = browser(), browser("10.0.0.2")
    log_in(here, "amina", PASSWORD)
    log_in(elsewhere, "amina", PASSWORD)

    changed = here.post(
        "/admin/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "a-new-pw-for-amina-9",
            "new_password2": "a-new-pw-for-amina-9",
        },
    )

    assert changed.status_code == 302
    assert logged_in(here)
    assert elsewhere.get("/admin/").status_code == 302  # to the login page


def test_ops_setting_a_password_ends_every_session_of_that_user(amina):
    client = browser()
    log_in(client, "amina", PASSWORD)

    call_command(
        "create_staff_user",
        "amina",
        "--password",
        "ops-reset-pw-7731",
        "--merchant",
        str(amina.merchant_membership.merchant_id),
        "--role",
        "owner",
    )

    assert client.get("/admin/").status_code == 302
    assert get_user_model().objects.get(username="amina").check_password("ops-reset-pw-7731")


# --- ops: unlock_login ----------------------------------------------------------------------


def test_unlock_login_lets_a_locked_username_log_in_at_once(amina, password_checks):
    """Ops lift a lock (a merchant's owner locked out by someone guessing, say) without waiting
    for the window: the username's failures are forgotten, any case; with --address, the
    address's too. The output says how many were forgotten."""
    client = browser("10.0.0.9")
    for _ in range(5):
        log_in(client, "amina", WRONG)
    assert REFUSED in log_in(client, "amina", PASSWORD).content.decode()

    out = io.StringIO()
    call_command("unlock_login", "AMINA", "--address", "10.0.0.9", "--json", stdout=out)

    assert json.loads(out.getvalue()) == {
        "username": "AMINA",
        "failures_cleared": {"username": 5, "address": 5},
    }
    assert redis().get(counter("amina", "10.0.0.9")[0]) is None
    assert redis().get(counter("amina", "10.0.0.9")[1]) is None
    assert log_in(client, "amina", PASSWORD).status_code == 302
    assert len(password_checks) == 5


def test_unlock_login_without_an_address_leaves_the_addresses_count(amina):
    client = browser("10.0.0.8")
    for _ in range(2):
        log_in(client, "amina", WRONG)
    out = io.StringIO()

    call_command("unlock_login", "amina", stdout=out)

    assert out.getvalue().strip() == "Unlocked 'amina': failures forgotten (username 2)."
    assert int(redis().get(counter("amina", "10.0.0.8")[1])) == 2
