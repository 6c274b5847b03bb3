import factory

from customers.models import Customer
from merchants.models import Merchant


class MerchantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Merchant

    name = factory.Sequence(lambda n: f"Merchant {n}")


class CustomerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Customer

    merchant = factory.SubFactory(MerchantFactory)
    first_name = "Awa"
    last_name = "Diallo"
    phone = "+221770000001"
    country_code = "SN"
