from __future__ import annotations

from celery import shared_task

from traces.services import import_job_run, run_execute


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_execute_task(run_id: int) -> None:
    run_execute(run_id=run_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def import_job_task(job_id: str) -> None:
    import_job_run(job_id=job_id)
