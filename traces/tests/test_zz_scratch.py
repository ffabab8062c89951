from __future__ import annotations
from datetime import timedelta
import pytest
from django.utils import timezone
from traces.tests.test_runs_ui import make_run, add_episodes, SUITE
from traces.services import backend_create, run_create
from conftest import member

@pytest.mark.django_db(transaction=True)
def test_shot(page, login, artifacts_dir):
    member("otto", "reviewer", "operator")
    b = backend_create(name="gpu", base_url="http://gpu:8000/v1", model="qwen3", api_key="sk-x", temperature=0.0)
    run = make_run(b, status="running", started_at=timezone.now() - timedelta(seconds=30), n_done=5, n_passed=3, n_failed=1, n_errored=1)
    add_episodes(run, ["passed"] * 3 + ["failed", "errored"] + ["running"] * 2)
    login(page, "otto")
    page.goto(f"/runs/{run.pk}/")
    page.screenshot(path=str(artifacts_dir / "scratch-run.png"), full_page=True)
    page.goto("/backends/")
    page.screenshot(path=str(artifacts_dir / "scratch-backends.png"), full_page=True)
    page.goto(f"/backends/{b.pk}/edit/")
    page.screenshot(path=str(artifacts_dir / "scratch-edit.png"), full_page=True)
