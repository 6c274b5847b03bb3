"""Input serializers share their fields across instances (core.serializers.InputSerializer):
each validation still gets its own errors and data, also under concurrent requests."""

import threading
import uuid

from payments.serializers import PayinCreateInput


def _body(phone: str | None) -> dict:
    source = {"phone": phone} if phone else {"account_number": 12}
    return {"quote_id": str(uuid.uuid4()), "customer_id": str(uuid.uuid4()), "source": source}


def test_fields_are_shared_but_errors_and_data_belong_to_each_validation():
    invalid = PayinCreateInput(data={**_body(None), "quote_id": 7})
    valid = PayinCreateInput(data=_body("+221770000123"))

    assert invalid.fields is valid.fields  # built and bound once for the class
    assert not invalid.is_valid()
    assert valid.is_valid(), valid.errors
    assert set(invalid.errors) == {"quote_id", "source"}
    assert valid.validated_data["source"] == {"phone": "+221770000123"}
    assert not PayinCreateInput(data=_body(None)).is_valid()  # the earlier errors did not stick


def test_concurrent_validations_do_not_see_each_others_data():
    outcomes: dict[int, tuple[bool, object]] = {}
    barrier = threading.Barrier(8, timeout=30)

    def validate(index: int) -> None:
        barrier.wait()
        for _ in range(200):
            phone = f"+22177000{index:04d}" if index % 2 else None
            serializer = PayinCreateInput(data=_body(phone))
            ok = serializer.is_valid()
            seen = serializer.validated_data["source"]["phone"] if ok else serializer.errors
            if ok != bool(index % 2) or (ok and seen != phone):
                outcomes[index] = (ok, seen)
                return
        outcomes.setdefault(index, (True, None))

    threads = [threading.Thread(target=validate, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert outcomes == dict.fromkeys(range(8), (True, None))
