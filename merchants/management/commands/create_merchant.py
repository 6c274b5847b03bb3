from config.ops import OpsCommand
from merchants import services


class Command(OpsCommand):
    help = "Create a merchant; optionally enable every catalog operator and corridor, and a key."

    def add_command_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--all-operators", action="store_true")
        parser.add_argument("--with-key", action="store_true")

    def run(self, *, name: str, all_operators: bool, with_key: bool, **_) -> None:
        merchant = services.merchant_create(name=name)
        if all_operators:
            services.merchant_enable_all_operators(merchant=merchant)
        data = {"merchant_id": str(merchant.id)}
        lines = [f"Merchant {merchant.name}: {merchant.id}"]
        if with_key:
            issued = services.api_key_create_by(
                merchant=merchant, actor=None, label="created by create_merchant"
            )
            data |= {"api_key": issued.api_key.key, "api_secret": issued.secret}
            lines += [
                f"API key:    {issued.api_key.key}",
                f"API secret: {issued.secret}  (shown once)",
            ]
        self.emit(data, "\n".join(lines))
