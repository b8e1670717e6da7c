/* The crew pages' words in the page's language, from the catalog the page carries with it
 * (services/i18n.py): t() for a text, tn() for a text with a count, whose catalog forms come by
 * the language's plural categories (Intl.PluralRules), so no text needs an "(s)". */
window.CrewWords = function (messages, language) {
  "use strict";
  var rules = new Intl.PluralRules(language);

  function fill(text, values) {
    Object.keys(values || {}).forEach(function (name) {
      text = text.split("{" + name + "}").join(String(values[name]));
    });
    return text;
  }

  /* A text in the page's language, {name} filled in. */
  function t(text, values) {
    var said = messages[text];
    return fill(typeof said === "string" ? said : text, values);
  }

  /* A text with a count in the page's language: the catalog's form for the count's category
   * ("one", "many", "other"...), else English's own two. */
  function tn(singular, plural, count, values) {
    var forms = messages[singular];
    var text = count === 1 ? singular : plural;
    if (forms && typeof forms === "object") {
      text = forms[rules.select(count)] || forms.other || text;
    }
    return fill(text, values);
  }

  return { t: t, tn: tn };
};
