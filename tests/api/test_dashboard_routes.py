"""The dashboard's server side: `/ui` and its files, `/topology`, and `/metrics/{instance}` relayed."""

from __future__ import annotations

import httpx

from api.routes.ui import STATIC_DIR
from streams_core import State
from streams_core.runtime.kafka_streams import LagInfo
from tests.api.fakes import COUNTS, HOST_A, HOST_B, IDS, SESSIONS, TOPIC, WINDOWED, Cluster, build_topology


async def test_ui_serves_the_page_and_its_two_files_only(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="ui/static/dashboard.js"' in page.text and 'href="ui/static/dashboard.css"' in page.text
    script, style = await client.get("/ui/static/dashboard.js"), await client.get("/ui/static/dashboard.css")
    assert script.headers["content-type"].startswith("text/javascript") and "parsePrometheus" in script.text
    assert style.headers["content-type"].startswith("text/css")
    for other in ("index.html", "..%2Fapp.py", "nope.js"):
        assert (await client.get(f"/ui/static/{other}")).status_code == 404


def test_the_page_loads_nothing_from_another_origin() -> None:
    """Offline by construction: no http(s) URL in the page, its script or its style (but the SVG namespace)."""
    for path in STATIC_DIR.iterdir():
        text = path.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path.name


async def test_topology_describes_nodes_links_and_stores(client: httpx.AsyncClient) -> None:
    answer = await client.get("/topology")
    assert answer.status_code == 200
    body = answer.json()
    assert body["applicationId"] == "api-test"
    assert body["description"] == str(build_topology().describe())
    [sub] = body["subtopologies"]
    assert sub["id"] == 0 and sub["globalStore"] is False
    source, processor = sub["nodes"]
    assert source == {
        "name": "SOURCE", "kind": "source", "topics": [TOPIC], "topicPattern": None, "stores": [],
        "predecessors": [], "successors": ["P"],
    }  # fmt: skip
    assert processor["kind"] == "processor" and processor["predecessors"] == ["SOURCE"]
    assert processor["stores"] == sorted([COUNTS, IDS, WINDOWED, SESSIONS])
    kinds = {store["name"]: store["kind"] for store in body["stores"]}
    assert kinds == {COUNTS: "key-value", IDS: "key-value", WINDOWED: "window", SESSIONS: "session"}


async def test_metrics_of_an_instance_are_relayed(cluster: Cluster, client: httpx.AsyncClient) -> None:
    cluster.b.lags = {COUNTS: {1: LagInfo(30, 33, 3)}}
    relayed = await client.get(f"/metrics/{HOST_B}")
    assert relayed.status_code == 200 and relayed.headers["x-served-by"] == str(HOST_B)
    assert relayed.headers["content-type"].startswith("text/plain")
    assert 'streams_store_lag_records{partition="1",store="counts"} 3.0' in relayed.text
    assert [r.url.path for r in cluster.transport.forwarded_to(HOST_B)] == ["/metrics"]
    own = await client.get(f"/metrics/{HOST_A}")
    assert own.status_code == 200 and "streams_store_lag_records{" not in own.text
    assert cluster.transport.forwarded_to(HOST_A) == []


async def test_metrics_of_unknown_or_unreachable_instances(cluster: Cluster, client: httpx.AsyncClient) -> None:
    unknown = await client.get("/metrics/10.0.0.9:7070")
    assert unknown.status_code == 404 and unknown.json() == {"error": "unknown instance", "instance": "10.0.0.9:7070"}
    cluster.transport.down.add(str(HOST_B))
    down = await client.get(f"/metrics/{HOST_B}")
    assert down.status_code == 503 and down.json()["error"] == "instance unreachable" and down.headers["Retry-After"]


async def test_metrics_are_relayed_for_the_members_discovery_lists(cluster: Cluster, client: httpx.AsyncClient) -> None:
    """During a rebalance the relay follows `/state/instances`: a member it lists, else 503 (never a 404)."""
    cluster.rebalance()
    members, relayed = await client.get("/state/instances"), await client.get(f"/metrics/{HOST_B}")
    if members.status_code == 503:
        assert relayed.status_code == 503 and relayed.headers["Retry-After"], relayed.text
    else:
        assert str(HOST_B) in [f"{m['host']}:{m['port']}" for m in members.json()]
        assert relayed.status_code == 200 and relayed.headers["x-served-by"] == str(HOST_B)
    cluster.a.state = State.CREATED
    assert (await client.get(f"/metrics/{HOST_B}")).status_code == 503
