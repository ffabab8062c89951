from __future__ import annotations

from django import forms

from traces.importers import IMPORTERS


class TraceUploadForm(forms.Form):
    file = forms.FileField()
    format = forms.ChoiceField(choices=[(name, name) for name in sorted(IMPORTERS)])
