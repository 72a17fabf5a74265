import pytest

from standins.clickup import ClickUp
from standins.llm import Llm
from standins.mailgun import Mailgun
from standins.pipedrive import Pipedrive
from tests.reliability.faultproxy import FaultPlan, FaultProxy


class ScriptedFaults(FaultPlan):
    """Faults aimed at given requests: `{"POST /v1/leads": ["reset_after"]}` faults the first such request only."""

    def __init__(self, script: dict[str, list[str]]):
        super().__init__()
        self.script = {line: list(faults) for line, faults in script.items()}

    def draw(self, request_line: str):
        for line, faults in self.script.items():
            if request_line.startswith(line) and faults:
                return faults.pop(0)
        return None


class Upstreams:
    """The stand-ins, each behind its own fault proxy, and our settings aimed at the proxies."""

    def __init__(self, settings):
        self.settings = settings
        self._stops = []
        self.pipedrive, self.clickup = Pipedrive(api_token="pd-token"), ClickUp(api_token="pk_clickup", list_id="901")
        self.mailgun, self.llm = Mailgun(api_key="key-test", sender_domain="mg.example.com"), Llm(api_key="k")
        self.fakes = [self.pipedrive, self.clickup, self.mailgun, self.llm]
        self.proxies = {}
        for name, fake in zip(("pipedrive", "clickup", "mailgun", "llm"), self.fakes, strict=True):
            fake.start()
            self.proxies[name] = FaultProxy(fake.address).start()
        settings.PIPEDRIVE_API_TOKEN = "pd-token"
        settings.PIPEDRIVE_API_URL = self.proxies["pipedrive"].url
        settings.CLICKUP_API_TOKEN, settings.CLICKUP_LIST_ID = "pk_clickup", "901"
        settings.CLICKUP_API_URL = self.proxies["clickup"].url
        settings.EMAIL_BACKEND = "anymail.backends.mailgun.EmailBackend"
        settings.ANYMAIL = {
            "MAILGUN_API_KEY": "key-test",
            "MAILGUN_SENDER_DOMAIN": "mg.example.com",
            "MAILGUN_API_URL": self.proxies["mailgun"].url + "/v3",
            "REQUESTS_TIMEOUT": 1.0,
        }
        settings.HTTP_READ_TIMEOUT = 1.0  # a withheld answer times out quickly

    def aim(self, name: str, plan: FaultPlan):
        self.proxies[name].plan = plan

    def add(self, name: str, address: tuple[str, int], *, stop) -> FaultProxy:
        """A further fake (started by the caller; `stop()` stops it with the rest) behind a proxy."""
        self._stops.append(stop)
        self.proxies[name] = FaultProxy(address).start()
        return self.proxies[name]

    def stop(self):
        for proxy in self.proxies.values():
            proxy.stop()
        for stop in [fake.stop for fake in self.fakes] + self._stops:
            stop()


@pytest.fixture
def upstreams(settings):
    stack = Upstreams(settings)
    yield stack
    stack.stop()
