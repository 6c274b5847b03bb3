"""config.rawsql.RowReader gives the instances the ORM would have given."""

import uuid
from decimal import Decimal

import pytest
from django.forms.models import model_to_dict

from config.rawsql import RowReader
from payments.models import Payin, PayinHistory
from tests.payments.conftest import create_customer, create_quote, payin_body

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {
        field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields
    }


def _journal(merchant, resource_id: uuid.UUID, memo: str):
    """An unsaved journal of the test resource: its unique key is (test, resource_id, test)."""
    from django.utils import timezone

    from payments.models import Journal

    return Journal(
        merchant=merchant,
        currency="XOF",
        kind="test",
        resource_type="test",
        resource_id=resource_id,
        memo=memo,
        created_at=timezone.now(),
    )


def test_a_row_read_by_equality_equals_the_orm_instance(enabled_api, enabled_merchant):
    customer = create_customer(enabled_api)
    payin_id = enabled_api.post(
        "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
    ).json()["id"]
    reader = RowReader(Payin, where=("id", "merchant"))

    read = reader.first(uuid.UUID(payin_id), enabled_merchant.pk)

    expected = Payin.objects.get(pk=payin_id)
    assert _fields(read) == _fields(expected)
    assert isinstance(read.source, dict) and read.source["phone"]  # JSON decoded, not text
    assert read.send_amount == expected.send_amount and read.created_at.tzinfo is not None
    assert model_to_dict(read) == model_to_dict(expected)
    assert reader.first(uuid.UUID(payin_id), uuid.uuid4()) is None  # another merchant: none


def test_rows_come_in_the_given_order(enabled_api, django_capture_on_commit_callbacks):
    customer = create_customer(enabled_api)
    with django_capture_on_commit_callbacks(execute=True):  # submitted and answered
        payin_id = enabled_api.post(
            "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
        ).json()["id"]
    reader = RowReader(PayinHistory, where=("payin",), order_by=("created_at", "id"))

    rows = reader.all(payin_id)

    assert [row.pk for row in rows] == list(
        PayinHistory.objects.filter(payin_id=payin_id)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )
    assert [row.status for row in rows] == ["created", "pending", "completed"]


def test_read_converts_a_hand_written_statements_rows_as_the_readers_own(
    enabled_api, django_assert_num_queries
):
    customer = create_customer(enabled_api)
    payin_id = enabled_api.post(
        "/payins", payin_body(create_quote(enabled_api, "payin"), customer)
    ).json()["id"]
    reader = RowReader(Payin, where=("id",))
    sql = f"SELECT {reader.columns('p')} FROM payments_payin p WHERE p.id = %(id)s"

    with django_assert_num_queries(1):
        (read,) = reader.read(sql, {"id": uuid.UUID(payin_id)})

    assert _fields(read) == _fields(Payin.objects.get(pk=payin_id))
    assert isinstance(read.source, dict) and read.created_at.tzinfo is not None
    assert reader.read(sql, {"id": uuid.uuid4()}) == []
    with pytest.raises(ValueError):
        RowReader(Payin, where=("id",), related=("merchant",)).read(sql, {"id": payin_id})


def test_or_null_also_matches_the_platform_rows_and_order_by_descends(merchant, other_merchant):
    from quotes.models import FeeSchedule

    platform = FeeSchedule.objects.create(merchant=None, flow_type="payin", percentage="1")
    own = FeeSchedule.objects.create(merchant=merchant, flow_type="payin", percentage="2")
    FeeSchedule.objects.create(merchant=other_merchant, flow_type="payin", percentage="3")
    FeeSchedule.objects.create(merchant=merchant, flow_type="payin", active=False)
    FeeSchedule.objects.create(merchant=merchant, flow_type="payout")
    reader = RowReader(
        FeeSchedule,
        where=("flow_type", "active", "merchant"),
        or_null=("merchant",),
        order_by=("-id",),
    )

    rows = reader.all("payin", True, merchant.pk)

    assert [row.pk for row in rows] == list(
        FeeSchedule.objects.filter(flow_type="payin", active=True, merchant__in=[merchant])
        .union(FeeSchedule.objects.filter(flow_type="payin", active=True, merchant=None))
        .order_by("-id")
        .values_list("pk", flat=True)
    )
    assert {own.pk, platform.pk} <= {row.pk for row in rows}


def test_a_readers_jsonb_array_reads_back_as_the_orm_instances_with_exact_amounts(merchant):
    from django.db import connection

    from quotes.models import FeeSchedule

    FeeSchedule.objects.create(
        merchant=merchant,
        flow_type="payin",
        percentage=Decimal("1.2345"),
        fixed_amount=Decimal("0.10"),
        minimum_fee=Decimal("12345678901234567.89"),  # beyond a float's exactness
        maximum_fee=None,
    )
    FeeSchedule.objects.create(
        merchant=None, flow_type="payout", percentage=Decimal("1.5"), maximum_fee=Decimal("15000")
    )
    reader = RowReader(FeeSchedule, where=("merchant",), or_null=("merchant",), order_by=("id",))
    sql, fields = reader.jsonb_array()
    assert fields == [FeeSchedule._meta.get_field("merchant")]  # what prepares its one value
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ({sql})", [merchant.pk])
        (text,) = cursor.fetchone()

    rows = reader.from_jsonb(text)

    expected = FeeSchedule.objects.filter(pk__in=[row.pk for row in rows]).order_by("id")
    assert len(rows) == expected.count() >= 2
    assert [row.pk for row in rows] == [row.pk for row in reader.all(merchant.pk)]
    for row, orm in zip(rows, expected, strict=True):
        assert model_to_dict(row) == model_to_dict(orm)
        assert row.created_at == orm.created_at and row.merchant_id == orm.merchant_id
        assert str(row.percentage) == str(orm.percentage)  # the same scale: "1.2345", "1.5000"
        assert not row._state.adding
    assert reader.from_jsonb(None) == []


def test_update_writes_the_named_fields_like_save_and_refuses_a_missing_row(merchant):
    from django.db import DatabaseError

    from config.rawsql import update
    from payments.models import Wallet

    wallet = Wallet.objects.create(merchant=merchant, currency="XOF")
    before = wallet.updated_at
    wallet.available = Decimal("12.50")
    wallet.reserved = Decimal("99")  # not named: not written

    update(wallet, ["available", "updated_at"])

    stored = Wallet.objects.get(pk=wallet.pk)
    assert stored.available == Decimal("12.50") and stored.reserved == 0
    assert stored.updated_at > before  # auto_now, as save() would
    Wallet.objects.filter(pk=wallet.pk).delete()
    with pytest.raises(DatabaseError):
        update(wallet, ["available"])


def test_insert_writes_what_save_would_with_defaults_and_a_generated_key(merchant):
    from config.rawsql import insert, insert_many
    from quotes.models import FeeSchedule

    written = insert(FeeSchedule(merchant=merchant, flow_type="payout", percentage="1.25"))
    by_orm = FeeSchedule.objects.create(merchant=merchant, flow_type="payout", percentage="1.25")
    by_orm.refresh_from_db()

    assert written.pk is not None and written.pk != by_orm.pk  # read back from the sequence
    assert not written._state.adding  # a saved instance: save() now updates it
    stored = FeeSchedule.objects.get(pk=written.pk)
    ignored = {"id", "created_at", "updated_at"}
    assert {k: v for k, v in _fields(stored).items() if k not in ignored} == {
        k: v for k, v in _fields(by_orm).items() if k not in ignored
    }
    assert stored.fixed_amount == 0 and stored.active is True  # field defaults
    assert stored.created_at is not None and stored.updated_at is not None  # auto_now(_add)
    assert stored.created_at == written.created_at

    many = [FeeSchedule(merchant=merchant, flow_type="payin", fixed_amount=n) for n in (5, 6, 7)]
    insert_many(many)
    assert [FeeSchedule.objects.get(pk=row.pk).fixed_amount for row in many] == [5, 6, 7]


def test_insert_of_a_row_that_breaks_a_constraint_raises_and_writes_nothing(merchant):
    from django.db import IntegrityError, transaction

    from config.rawsql import insert
    from quotes.models import FeeSchedule

    before = FeeSchedule.objects.count()
    with pytest.raises(IntegrityError), transaction.atomic():
        insert(FeeSchedule(merchant=merchant, flow_type="no-such-flow", percentage="-5"))
    assert FeeSchedule.objects.count() == before


def test_update_where_updates_the_matching_rows_only_and_counts_them(merchant):
    from config.rawsql import update_where
    from quotes.models import FeeSchedule

    target = FeeSchedule.objects.create(merchant=merchant, flow_type="payout", fixed_amount=1)
    other = FeeSchedule.objects.create(merchant=merchant, flow_type="payin", fixed_amount=1)

    assert update_where(FeeSchedule, {"fixed_amount": Decimal("9")}, {"pk": target.pk}) == 1
    assert update_where(FeeSchedule, {"fixed_amount": 5}, {"pk": target.pk, "active": False}) == 0

    assert FeeSchedule.objects.get(pk=target.pk).fixed_amount == 9
    assert FeeSchedule.objects.get(pk=other.pk).fixed_amount == 1


def test_greater_than_is_null_and_limit_select_what_the_orm_would(merchant):
    from quotes.models import FeeSchedule

    for fixed, maximum in ((1, None), (5, None), (6, 10), (7, None), (9, None)):
        FeeSchedule.objects.create(
            merchant=merchant, flow_type="payout", fixed_amount=fixed, maximum_fee=maximum
        )
    reader = RowReader(
        FeeSchedule,
        where=("merchant",),
        greater_than=("fixed_amount",),
        is_null=("maximum_fee",),
        order_by=("fixed_amount",),
    )

    rows = reader.all(merchant.pk, Decimal("4"), limit=2)

    assert [row.fixed_amount for row in rows] == list(
        FeeSchedule.objects.filter(merchant=merchant, fixed_amount__gt=4, maximum_fee__isnull=True)
        .order_by("fixed_amount")
        .values_list("fixed_amount", flat=True)[:2]
    )
    assert [row.fixed_amount for row in rows] == [5, 7]


def test_annotations_are_read_with_the_row_and_their_values_prepared_by_their_fields(
    catalog, merchant, other_merchant
):
    from merchants.models import MerchantOperator
    from quotes.models import Operator

    operator = Operator.objects.get(code="SN_ORANGE_MOMO")
    MerchantOperator.objects.filter(operator=operator).delete()
    MerchantOperator.objects.create(merchant=merchant, operator=operator)
    reader = RowReader(
        Operator,
        where=("code",),
        annotations={
            "linked": (
                "EXISTS (SELECT 1 FROM merchants_merchantoperator link"
                " WHERE link.operator_id = quotes_operator.id AND link.merchant_id = %s)",
                [MerchantOperator._meta.get_field("merchant")],
            )
        },
    )

    read = reader.first("SN_ORANGE_MOMO", annotation_values=[merchant.pk])
    other = reader.first("SN_ORANGE_MOMO", annotation_values=[other_merchant.pk])

    assert _fields(read) == _fields(operator)
    assert bool(read.linked) is True and bool(other.linked) is False


def test_related_reads_the_foreign_row_in_the_same_statement(merchant, django_assert_num_queries):
    from merchants.models import ApiKey
    from merchants.services import api_key_create

    key = api_key_create(merchant=merchant, label="joined").api_key.key
    reader = RowReader(ApiKey, where=("key",), related=("merchant",))

    with django_assert_num_queries(1):
        read = reader.first(key)
        joined = read.merchant  # cached: no second query
    expected = ApiKey.objects.select_related("merchant").get(key=key)
    assert _fields(read) == _fields(expected)
    assert _fields(joined) == _fields(expected.merchant)
    assert reader.first("ck_unknown") is None
    with pytest.raises(ValueError):
        RowReader(ApiKey, where=("key",), related=("merchant",), for_update=True)


def test_insert_if_absent_writes_once_and_leaves_the_existing_row_alone(merchant):
    from config.rawsql import insert_if_absent
    from payments.models import Journal

    resource_id = uuid.uuid4()
    first, second = (_journal(merchant, resource_id, memo) for memo in ("first", "second"))
    assert insert_if_absent(first) is True and not first._state.adding
    assert insert_if_absent(second) is False and second._state.adding  # the unique key
    assert list(Journal.objects.filter(resource_id=resource_id).values_list("memo", flat=True)) == [
        "first"
    ]


def test_save_together_writes_updates_and_inserts_in_one_statement(
    merchant, django_assert_num_queries
):
    from django.utils import timezone

    from config.rawsql import save_together
    from payments.models import Journal, JournalLine, LedgerAccount, Wallet
    from quotes.models import FeeSchedule

    wallet = Wallet.objects.create(merchant=merchant, currency="XOF")
    before = wallet.updated_at
    account = LedgerAccount.objects.create(merchant=merchant, currency="XOF", code="test")
    journal = Journal.objects.create(
        merchant=merchant,
        currency="XOF",
        kind="test",
        resource_type="test",
        resource_id=uuid.uuid4(),
        created_at=timezone.now(),
    )
    wallet.available = Decimal("40.00")
    wallet.reserved = Decimal("99")  # not named: not written
    lines = [JournalLine(journal=journal, account=account, amount=a) for a in ("40", "-40")]
    fee = FeeSchedule(merchant=merchant, flow_type="payout", percentage="1.25")

    with django_assert_num_queries(1):
        save_together(updates=[(wallet, ["available", "updated_at"])], inserts=[*lines, fee])

    stored = Wallet.objects.get(pk=wallet.pk)
    assert stored.available == Decimal("40.00") and stored.reserved == 0
    assert stored.updated_at > before  # auto_now, as save() would
    assert all(line.pk is not None and not line._state.adding for line in lines)  # read back
    assert [JournalLine.objects.get(pk=line.pk).amount for line in lines] == [40, -40]
    assert FeeSchedule.objects.get(pk=fee.pk).active is True  # field defaults, as save()


def test_save_together_refuses_a_missing_row_and_its_transaction_keeps_nothing(merchant):
    from django.db import DatabaseError, transaction

    from config.rawsql import save_together
    from payments.models import Wallet
    from quotes.models import FeeSchedule

    wallet = Wallet.objects.create(merchant=merchant, currency="XOF")
    Wallet.objects.filter(pk=wallet.pk).delete()
    before = FeeSchedule.objects.count()
    with pytest.raises(DatabaseError), transaction.atomic():
        save_together(
            updates=[(wallet, ["available"])],
            inserts=[FeeSchedule(merchant=merchant, flow_type="payout", percentage="1")],
        )
    assert FeeSchedule.objects.count() == before


def test_save_together_unless_present_writes_the_rest_only_with_its_guard_row(
    merchant, django_assert_num_queries
):
    from config.rawsql import save_together
    from payments.models import Journal, JournalLine, LedgerAccount, Wallet

    wallet = Wallet.objects.create(merchant=merchant, currency="XOF")
    account = LedgerAccount.objects.create(merchant=merchant, currency="XOF", code="test")
    resource_id = uuid.uuid4()

    def post(memo: str, amount: str) -> tuple[bool, Journal, list[JournalLine]]:
        journal = _journal(merchant, resource_id, memo)
        lines = [JournalLine(journal=journal, account=account, amount=a) for a in (amount, "-1")]
        wallet.available += Decimal(amount)
        with django_assert_num_queries(1):
            written = save_together(
                unless_present=journal, updates=[(wallet, ["available"])], inserts=lines
            )
        return written, journal, lines

    written, first, lines = post("first", "5")
    assert written is True and not first._state.adding
    assert all(line.pk is not None for line in lines)  # generated keys read back
    assert Wallet.objects.get(pk=wallet.pk).available == Decimal("5")

    written, second, lines = post("second", "7")  # the same unique key: nothing else written

    assert written is False and second._state.adding
    assert all(line.pk is None and line._state.adding for line in lines)
    assert Wallet.objects.get(pk=wallet.pk).available == Decimal("5")
    assert list(Journal.objects.filter(resource_id=resource_id).values_list("memo", flat=True)) == [
        "first"
    ]
    assert JournalLine.objects.filter(journal__resource_id=resource_id).count() == 2


def test_save_together_unless_present_refuses_a_value_too_long_rather_than_cutting_it(merchant):
    from django.db import DataError, transaction

    from config.rawsql import save_together
    from quotes.models import FeeSchedule

    too_long = FeeSchedule(merchant=merchant, flow_type="payout" * 10, percentage="1")

    with pytest.raises(DataError), transaction.atomic():
        save_together(unless_present=_journal(merchant, uuid.uuid4(), "x"), inserts=[too_long])
    assert not FeeSchedule.objects.filter(merchant=merchant).exists()


def test_save_together_only_if_writes_the_rest_only_while_the_row_holds_what_was_read(
    merchant, django_assert_num_queries
):
    from django.db import connection

    from config.rawsql import Part, save_together
    from payments.models import Journal, Wallet

    if connection.vendor != "postgresql":
        pytest.skip("only_if, increments and parts are PostgreSQL's")
    wallet = Wallet.objects.create(merchant=merchant, currency="XOF", available=Decimal("10"))
    Wallet.objects.filter(pk=wallet.pk).update(available=Decimal("15"))  # after it was read
    resource_id = uuid.uuid4()
    marker = Part(
        name="marker",
        sql="SELECT 1 FROM merchants_merchant WHERE id = %s{condition}",
        params=[merchant.pk],
    )

    def write(memo: str) -> bool:
        journal = _journal(merchant, resource_id, memo)
        merchant.name = f"renamed {memo}"
        with django_assert_num_queries(1):
            return save_together(
                only_if=(merchant, ["name"], {"status": merchant.status}),
                increments=[(wallet, {"available": Decimal("2")}, ["updated_at"])],
                inserts=[journal],
                also=[marker],
            )

    original = merchant.status
    merchant.status = "suspended"  # not what the row holds: nothing is written
    assert write("refused") is False
    assert marker.rows == 0
    merchant.status = original
    assert Wallet.objects.get(pk=wallet.pk).available == Decimal("15")
    assert not Journal.objects.filter(resource_id=resource_id).exists()

    assert write("written") is True
    assert marker.rows == 1
    assert Wallet.objects.get(pk=wallet.pk).available == Decimal("17")  # added to the row's
    merchant.refresh_from_db()
    assert merchant.name == "renamed written"
    assert list(Journal.objects.filter(resource_id=resource_id).values_list("memo", flat=True)) == [
        "written"
    ]


def test_holding_sends_the_held_writes_with_the_holders_own_in_one_statement(
    enabled_api, django_assert_num_queries
):
    from django.db import DatabaseError, connection, transaction

    from config.rawsql import Part, holding, save_together
    from payments.models import Wallet
    from quotes.models import Quote

    if connection.vendor != "postgresql":
        pytest.skip("writes are held on PostgreSQL only")
    quote = Quote.objects.get(pk=create_quote(enabled_api, "payin")["id"])
    customer = create_customer(enabled_api)
    payin = Payin(
        merchant_id=quote.merchant_id,
        quote=quote,
        customer_id=customer["id"],
        send_amount=quote.send_amount,
        send_currency=quote.send_currency,
        receive_amount=quote.receive_amount,
        receive_currency=quote.receive_currency,
        total_fee=quote.total_fee,
        country_code=quote.country_code,
        rail_type=quote.rail_type,
        operator_code=quote.operator_code,
        provider_timeout_at=quote.expires_at,
        created_at=quote.created_at,
        updated_at=quote.created_at,
    )
    history = PayinHistory(payin=payin, status="created", created_at=quote.created_at)
    wallet = Wallet.objects.create(merchant_id=quote.merchant_id, currency="XOF")
    wallet.updated_at = None
    marker = Part(name="marker", sql="SELECT 1 WHERE true{condition}", params=[])

    with holding() as held:
        with django_assert_num_queries(0):
            assert save_together(inserts=[payin, history]) is True
            quote.status, quote.consumed_at = "consumed", quote.created_at
            wallet.available = Decimal("3")
            assert save_together(
                updates=[(quote, ["status", "consumed_at"]), (wallet, ["available", "updated_at"])]
            )
        assert wallet.updated_at is not None  # prepared (auto_now applied), not written:
        assert payin._state.adding and Wallet.objects.get(pk=wallet.pk).available == 0
        assert not Payin.objects.filter(pk=payin.pk).exists()
        held.add(also=[marker])
        with django_assert_num_queries(1):
            assert held.send() is True

    assert marker.rows == 1 and history.pk is not None and not payin._state.adding
    assert Payin.objects.get(pk=payin.pk).created_at == payin.created_at
    assert Quote.objects.get(pk=quote.pk).status == "consumed"
    assert Wallet.objects.get(pk=wallet.pk).updated_at == wallet.updated_at

    gone = Quote(pk=uuid.uuid4(), status="consumed")  # a missing row: raised by send()
    with pytest.raises(DatabaseError), transaction.atomic(), holding() as held:
        save_together(updates=[(gone, ["status"])])
        held.send()


def test_a_held_statement_only_while_a_row_is_there_writes_nothing_once_it_is_gone(
    merchant, django_assert_num_queries
):
    """`Held.only_while`: every write of the statement, its guard's too, depends on a locked
    read; when it reads nothing, its refusal is raised (not the guard's, which held)."""
    from django.db import connection

    from config.rawsql import holding, save_together
    from payments.models import Journal, Wallet

    if connection.vendor != "postgresql":
        pytest.skip("writes are held on PostgreSQL only")
    wallet = Wallet.objects.create(merchant=merchant, currency="XOF")
    required = "SELECT 1 FROM payments_wallet WHERE id = %s FOR UPDATE"

    class Gone(Exception):
        pass

    def write(memo: str, wallet_id) -> None:
        merchant.name = f"renamed {memo}"
        with holding() as held:
            held.only_if((merchant, ["name"], {"status": merchant.status}), AssertionError)
            save_together(inserts=[_journal(merchant, uuid.uuid4(), memo)])
            held.only_while(required, [wallet_id], Gone)
            with django_assert_num_queries(1):
                held.send()

    with pytest.raises(Gone):
        write("refused", uuid.uuid4())
    merchant.refresh_from_db()
    assert merchant.name != "renamed refused"
    assert not Journal.objects.filter(memo="refused").exists()

    write("written", wallet.pk)
    merchant.refresh_from_db()
    assert merchant.name == "renamed written"
    assert Journal.objects.filter(memo="written").count() == 1


def _tag_ride(merchant, tag: str, after=lambda value: None):
    """A ride that claims the Idempotency-Key `tag` (a data-modifying statement, returning the
    record's id or, when the key is held already, nothing)."""
    from django.utils import timezone

    from config.rawsql import Ride
    from merchants import idempotency

    claim = idempotency._claim_params(
        merchant=merchant, key=tag, method="POST", path="/t", fingerprint="f", now=timezone.now()
    )
    return Ride(sql=idempotency._CLAIM_SQL, params=claim, after=after)


def _claimed(merchant, tag: str):
    from merchants.models import IdempotencyRecord

    return IdempotencyRecord.objects.filter(merchant=merchant, key=tag).first()


def test_a_ride_goes_with_the_first_read_only_and_the_rows_are_unchanged(
    merchant, django_assert_num_queries
):
    from config.rawsql import riding
    from merchants.models import ApiKey
    from merchants.services import api_key_create

    key = api_key_create(merchant=merchant, label="ridden").api_key.key
    reader = RowReader(ApiKey, where=("key",), related=("merchant",))
    alone = reader.first(key)

    with riding(_tag_ride(merchant, "rode")) as ride, django_assert_num_queries(2):
        read = reader.first(key)
        again = reader.first(key)  # the ride was sent: a plain read
    assert (ride.sent, ride.value) == (True, _claimed(merchant, "rode").id)
    assert _fields(read) == _fields(alone) == _fields(again)
    assert _fields(read.merchant) == _fields(alone.merchant)


def test_a_ride_on_a_read_that_finds_nothing_still_writes_and_answers(merchant):
    from config.rawsql import riding
    from merchants.models import IdempotencyRecord

    reader = RowReader(IdempotencyRecord, where=("merchant", "key"))
    with riding(_tag_ride(merchant, "empty")) as ride:
        assert reader.all(merchant.pk, "nobody") == []
    assert ride.value == _claimed(merchant, "empty").id
    with riding(_tag_ride(merchant, "empty")) as ride:  # held now: the ride writes nothing
        (found,) = reader.all(merchant.pk, "empty")
    assert ride.sent and ride.value is None
    assert _fields(found) == _fields(_claimed(merchant, "empty"))


def test_a_ride_whose_check_raises_stops_the_read_but_its_write_stays(merchant):
    from config.rawsql import riding
    from customers.models import Customer

    class Refused(Exception):
        pass

    def refuse(value):
        raise Refused(value)

    reader = RowReader(Customer, where=("merchant",))
    with riding(_tag_ride(merchant, "kept", after=refuse)), pytest.raises(Refused):
        reader.all(merchant.pk)
    assert _claimed(merchant, "kept") is not None


def test_a_ride_is_never_sent_outside_postgresql_or_without_a_read(merchant):
    from django.db import connection

    from config.rawsql import riding

    with riding(_tag_ride(merchant, "unsent")) as ride:
        pass
    assert ride.sent is False
    if connection.vendor != "postgresql":
        from customers.models import Customer

        with riding(_tag_ride(merchant, "unsent")) as ride:
            RowReader(Customer, where=("merchant",)).all(merchant.pk)
        assert ride.sent is False
