"""The visitor's progress page at `/prototype/<leadId>/`: its script follows the SSE stream."""

from csp.decorators import csp_update
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse

from prototypes import selectors


# The preview's host is V0's and known only once it is ready; the frame is sandboxed and shown on request.
@csp_update({"frame-src": ["https:"]})
def prototype_page(request, lead_id):
    prototype = selectors.prototype_for_public_lead(public_id=lead_id)
    if prototype is None:
        raise Http404("No prototype here.")
    context = {
        # Only the visitor's own first name: the URL may be shared.
        "first_name": prototype.lead.first_name,
        "prototype": prototype,
        "stream_url": reverse("prototype-stream", args=[lead_id]),
        "failure_message": selectors.prototype_failure_message(prototype=prototype),
    }
    return render(request, "prototypes/progress.html", context)
