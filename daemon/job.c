/*
 * job.c — the bottom of kvd's request path: a job's reply handed back to
 * its transport (through j->reply, which the transport set), its release,
 * and the daemon's clock. Every module above calls these; they call nothing
 * of the daemon back.
 */
#include "kvd.h"

#include "log.h"

#include <string.h>
#include <time.h>

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void job_release(struct job *j)
{
	if (!j->live)
		return;
	j->live = false;
	rpc_req_release(&j->req);
	if (j->msg != NULL) {
		nng_msg_free(j->msg);
		j->msg = NULL;
	}
	free(j->body);
	j->body = NULL;
}

void job_reply(struct job *j, struct rpc_reply *rp)
{
	/* a reply that ran out of memory half way is not sent so */
	if (rpc_reply_finish(rp, j->req.id) != 0)
		klog(LOG_ERR, "out of memory: request %llu gets an empty reply",
		     (unsigned long long)j->req.id);
	metrics_reply(j, rp);
	j->reply(j, rp);
}

void job_reply_error(struct job *j, uint64_t id, int status, const char *msg)
{
	struct rpc_reply rp;

	rpc_reply_init(&rp);
	rpc_reply_error(&rp, id, status, msg);
	job_reply(j, &rp);
}
