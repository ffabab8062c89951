from __future__ import annotations

from django import forms

from accounts.models import ApiToken


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100)
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple, initial=["read"]
    )
